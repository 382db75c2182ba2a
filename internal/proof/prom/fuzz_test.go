package prom

import (
	"math"
	"testing"
)

// FuzzParse feeds Parse any answer a Prometheus server (or something
// pretending to be one) could send: it must not panic, and what it
// accepts is one point per value, each a number.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000.5,"0.012"],[1700000001,"NaN"]]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{"status":"error","errorType":"bad_data","error":"parse error"}`,
		`{"status":"success","data":{"resultType":"vector","result":[]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1e300,"1"],["x",2]]}]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1,"+Inf"]]},{"values":[]}]}}`,
		`null`, `[]`, ``, `{"data":{"result":[{"values":[[1]]}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pts, err := Parse(b)
		if err != nil {
			if pts != nil || err.Error() == "" {
				t.Fatalf("Parse = %v, %v", pts, err)
			}
			return
		}
		for _, p := range pts {
			if p.T.IsZero() && !math.IsNaN(p.V) && p.V != p.V {
				t.Fatalf("point %+v", p)
			}
		}
	})
}
