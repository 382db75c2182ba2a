package config

import (
	"os"
	"testing"
)

func BenchmarkParseGood(b *testing.B) {
	data, err := os.ReadFile("testdata/good.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Parse(data, "good.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseBad(b *testing.B) {
	data, err := os.ReadFile("testdata/bad.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Parse(data, "bad.yaml")
	}
}
