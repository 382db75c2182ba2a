package upgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSameSeesEveryField: Same is written field by field, so a field
// added to the record (or to a member, a batch, an effect, the plan)
// and forgotten there would let the engine skip the write of a record
// that changed. A record with every field set (every pointer, list and
// map holding one of everything) is changed in one place at a time,
// found by reflection: each field of each nested value in turn, a list
// or a map one element longer, a pointer nil. Same must see each
// change, either way round; and it must not see a copy, or a change of
// the times it leaves out (Updated, Alive).
func TestSameSeesEveryField(t *testing.T) {
	var a Upgrade
	fill(t, reflect.ValueOf(&a).Elem(), 0)
	if !Same(a, deepCopy(a)) {
		t.Fatal("a record and its deep copy differ")
	}
	n := 0
	for ; ; n++ {
		b := deepCopy(a)
		w := changer{t: t, n: n, skip: map[string]bool{"Upgrade.Updated": true, "Upgrade.Alive": true}}
		w.visit(reflect.ValueOf(&b).Elem(), "Upgrade")
		if !w.done {
			break
		}
		if Same(a, b) || Same(b, a) {
			t.Errorf("Same misses a change of %s", w.label)
		}
	}
	if n < 150 {
		t.Fatalf("only %d changes tried: the walk missed part of the record", n)
	}
	b := deepCopy(a)
	b.Updated, b.Alive = b.Updated.Add(time.Hour), b.Alive.Add(time.Hour)
	if !Same(a, b) {
		t.Error("Same sees a change of Updated or Alive, which it leaves out")
	}
	t.Logf("%d changes tried", n)
}

// TestSameAsJSON: Same agrees with what the engine compared before
// it, the records' JSON without their times: at every change the
// simulated world reports (world.report checks each, in every test
// that runs one), and on a record whose members are all replaced by
// equal copies, then one of them changed.
func TestSameAsJSON(t *testing.T) {
	w := describedWorld(t, describe("api", "{type: canary, max_batch: 2, max_unavailable: 2}", 6,
		"    hooks:\n      pre_stop: [{http: \"http://lb/{{.Name}}/drain\", method: POST, undo: {http: \"http://lb/{{.Name}}/enable\", method: POST}}]\n", onThreeHosts))
	if err := w.begin("2.0.0"); err != nil {
		t.Fatal(err)
	}
	w.run(10*time.Minute, nil)
	if w.u.State != StateCompleted {
		t.Fatalf("ended %s, want completed:\n%s", w.u.State, w.trace.String())
	}
	a := w.u
	b := a
	b.Members = map[string]*Member{}
	for n, m := range a.Members {
		c := *m
		b.Members[n] = &c
	}
	checkSameAsJSON(t, a, b)
	b.Members["api-3"].Tries++
	checkSameAsJSON(t, a, b)
}

// touchedByValue is Touched the long way: every member of b whose
// value differs from a's, in order.
func touchedByValue(a, b Upgrade) []string {
	var out []string
	for n, mb := range b.Members {
		if ma := a.Members[n]; ma == nil || *ma != *mb {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// TestTouched: Touched names the members a step changed and no other,
// from the record's lineage when b was made from a, and by a pass over
// the members for any two records (world.report checks it against
// touchedByValue at every change of every upgrade test).
func TestTouched(t *testing.T) {
	w := describedWorld(t, describe("api", "{type: canary, max_batch: 2, max_unavailable: 2}", 6, "", onThreeHosts))
	if err := w.begin("2.0.0"); err != nil {
		t.Fatal(err)
	}
	var moved, idle int
	for i := 0; i < 200 && !w.u.State.Terminal(); i++ {
		a := w.u
		w.step()
		got := Touched(a, w.u)
		if want := touchedByValue(a, w.u); !slices.Equal(got, want) {
			t.Fatalf("step %d: Touched %v, want %v", i, got, want)
		}
		if len(got) == 0 {
			idle++
			if !sameMap(a.Members, w.u.Members) {
				t.Fatalf("step %d changed no member but copied the members map", i)
			}
		} else {
			moved++
		}
		w.advance(0)
		w.finish()
	}
	if moved == 0 || idle == 0 {
		t.Fatalf("%d steps moved members, %d did not: want both", moved, idle)
	}
	// Two records not made one from the other.
	a := w.u.Clone()
	b := w.u.Clone()
	b.Members["api-2"].Detail += "!"
	delete(b.Members, "api-5")
	b.Members["api-7"] = &Member{Name: "api-7"}
	if got, want := Touched(a, b), []string{"api-2", "api-7"}; !slices.Equal(got, want) {
		t.Errorf("Touched of two copies %v, want %v", got, want)
	}
	t.Logf("%d steps moved members, %d did not", moved, idle)
}

// checkSameAsJSON fails t when Same(a, b) is not what comparing their
// JSON, times left out, says.
func checkSameAsJSON(t *testing.T, a, b Upgrade) {
	t.Helper()
	if err := sameAsJSON(a, b); err != nil {
		t.Fatal(err)
	}
}

// sameAsJSON says how Same(a, b) differs from comparing their JSON,
// times left out, or nil.
func sameAsJSON(a, b Upgrade) error {
	if got, want := Same(a, b), sameJSON(a, b); got != want {
		return fmt.Errorf("Same says %v, the JSON %v:\n%s\n%s", got, want, jsonOf(a), jsonOf(b))
	}
	return nil
}

func sameJSON(a, b Upgrade) bool {
	a.Updated, b.Updated = time.Time{}, time.Time{}
	a.Alive, b.Alive = time.Time{}, time.Time{}
	return bytes.Equal(jsonOf(a), jsonOf(b))
}

func jsonOf(u Upgrade) []byte {
	j, err := json.Marshal(u)
	if err != nil {
		panic(err)
	}
	return j
}

var timeType = reflect.TypeFor[time.Time]()

// fill sets every field of v, recursively: pointers point at a filled
// value, lists and maps hold one filled element, but for those nested
// deeper than 12 (a plan's hosts layout holds phases, which may hold a
// hosts layout), left empty.
func fill(t *testing.T, v reflect.Value, depth int) {
	if depth > 12 {
		switch v.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			return
		}
	}
	if depth > 30 {
		t.Fatalf("the record nests deeper than 30 at %s", v.Type())
	}
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Uint8:
		v.SetUint(1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() { // the record's lineage (from, changed) says nothing
				fill(t, v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(t, v.Index(0), depth+1)
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, depth+1)
		v.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
	default:
		t.Fatalf("fill does not know %s (%s)", v.Type(), v.Kind())
	}
}

// deepCopy copies a record sharing nothing with it.
func deepCopy(u Upgrade) Upgrade {
	var out Upgrade
	copyValue(reflect.ValueOf(&out).Elem(), reflect.ValueOf(u))
	return out
}

func copyValue(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if !src.IsNil() {
			dst.Set(reflect.New(src.Type().Elem()))
			copyValue(dst.Elem(), src.Elem())
		}
	case reflect.Slice:
		if !src.IsNil() {
			dst.Set(reflect.MakeSlice(src.Type(), src.Len(), src.Len()))
			for i := range src.Len() {
				copyValue(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Map:
		if !src.IsNil() {
			dst.Set(reflect.MakeMap(src.Type()))
			for _, k := range src.MapKeys() {
				e := reflect.New(src.Type().Elem()).Elem()
				copyValue(e, src.MapIndex(k))
				dst.SetMapIndex(k, e)
			}
		}
	case reflect.Struct:
		if src.Type() == timeType {
			dst.Set(src)
			return
		}
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				copyValue(dst.Field(i), src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}

// changer makes the n-th change of a walk over a value: each leaf
// changed, each list and map one element longer, each pointer nil, in
// the walk's order; label says what it changed.
type changer struct {
	t     *testing.T
	n     int
	skip  map[string]bool
	done  bool
	label string
}

func (w *changer) change(label string, f func()) {
	if w.done {
		return
	}
	if w.n == 0 {
		f()
		w.done, w.label = true, label
	}
	w.n--
}

func (w *changer) visit(v reflect.Value, path string) {
	if w.done || w.skip[path] {
		return
	}
	if v.Type() == timeType {
		w.change(path, func() { v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Second))) })
		return
	}
	switch v.Kind() {
	case reflect.String:
		w.change(path, func() { v.SetString(v.String() + "x") })
	case reflect.Bool:
		w.change(path, func() { v.SetBool(!v.Bool()) })
	case reflect.Int, reflect.Int64, reflect.Int32:
		w.change(path, func() { v.SetInt(v.Int() + 1) })
	case reflect.Uint8:
		w.change(path, func() { v.SetUint(v.Uint() + 1) })
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				w.visit(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			w.change(path+" (nil)", func() { v.SetZero() })
			w.visit(v.Elem(), path)
		}
	case reflect.Slice:
		if v.Len() > 0 {
			w.change(path+" (one more)", func() { v.Set(reflect.Append(v, v.Index(0))) })
		}
		for i := range v.Len() {
			w.visit(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		if len(keys) > 0 {
			w.change(path+" (one more)", func() {
				e := reflect.New(v.Type().Elem()).Elem()
				copyValue(e, v.MapIndex(keys[0]))
				v.SetMapIndex(reflect.ValueOf("other").Convert(v.Type().Key()), e)
			})
		}
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			was := w.done
			w.visit(e, fmt.Sprintf("%s[%s]", path, k))
			if w.done && !was {
				v.SetMapIndex(k, e)
			}
		}
	default:
		w.t.Fatalf("%s: the walk does not know %s (%s)", path, v.Type(), v.Kind())
	}
}
