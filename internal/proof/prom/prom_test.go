package prom

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		n          int
		err        string
	}{
		{"one series", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"0.01"],[1700000001.5,"NaN"]]}]}}`, 2, ""},
		{"no series", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, 0, ""},
		{"two series", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"1"},"values":[]},{"metric":{"a":"2"},"values":[]}]}}`, 0, "2 series, want one"},
		{"an error", `{"status":"error","errorType":"bad_data","error":"1:5: parse error"}`, 0, "bad_data: 1:5: parse error"},
		{"a vector", `{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, "a vector, want a matrix"},
		{"not JSON", `<html>`, 0, "not a Prometheus answer"},
		{"a bad value", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"x"]]}]}}`, 0, `"x" is not a number`},
		{"a bad pair", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[["1",2]]}]}}`, 0, "is not [time"},
	} {
		pts, err := Parse([]byte(tc.body))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && (err != nil || len(pts) != tc.n):
			t.Errorf("%s: %d points, %v; want %d", tc.name, len(pts), err, tc.n)
		}
	}
	pts, _ := Parse([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000001.5,"0.25"]]}]}}`))
	if pts[0].T.UnixMilli() != 1700000001500 || pts[0].V != 0.25 {
		t.Errorf("point %+v", pts[0])
	}
}

func TestMerge(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	lat := []Point{{at(0), 0.010}, {at(1), math.NaN()}, {at(2), 0.200}, {at(3), 0.012}}
	errs := []Point{{at(0), 0}, {at(2), 1.5}, {at(3), math.NaN()}}
	got := Merge(lat, errs, true)
	if len(got) != 3 {
		t.Fatalf("%d samples, want 3 (the NaN latency left out): %+v", len(got), got)
	}
	if !got[0].OK || got[0].Latency != 10*time.Millisecond || got[0].Op != Op {
		t.Errorf("first: %+v", got[0])
	}
	if got[1].OK || got[1].Err != "1.5 errors/s" || got[1].Latency != 200*time.Millisecond {
		t.Errorf("the step with errors: %+v", got[1])
	}
	if !got[2].OK {
		t.Errorf("a NaN error rate is no error: %+v", got[2])
	}
	only := Merge(nil, errs, false)
	if len(only) != 2 || only[1].OK {
		t.Errorf("errors alone: %+v", only)
	}
}
