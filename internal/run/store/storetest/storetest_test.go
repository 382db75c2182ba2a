package storetest_test

import (
	"testing"

	"github.com/ferry-upgrade/ferry/internal/run/store"
	"github.com/ferry-upgrade/ferry/internal/run/store/storetest"
)

// TestBolt runs the suite on the bbolt store: each writer a Store of
// its own on one data directory, as each process opens it.
func TestBolt(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Subject {
		dir := t.TempDir()
		return storetest.Subject{
			Writer: func(t *testing.T, name string) store.Records {
				s, err := store.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			NoExpiry: "bbolt's claim is taken with the engine lock, an flock the kernel ends with its process: it does not expire",
		}
	})
}
