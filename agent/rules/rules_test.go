package rules

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// Every threshold and window reaches the rule file: a field the writer
// forgot would leave the file and the simulation apart.
func TestEveryFieldWritten(t *testing.T) {
	write := func(r Rules) string {
		var b bytes.Buffer
		if err := r.WriteYAML(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	base := Default()
	want := write(base)
	v := reflect.ValueOf(&base).Elem()
	for i := range v.NumField() {
		r := Default()
		f := reflect.ValueOf(&r).Elem().Field(i)
		switch f.Interface().(type) {
		case time.Duration:
			f.SetInt(f.Int() * 2)
		case float64:
			f.SetFloat(f.Float() / 2)
		case int:
			f.SetInt(f.Int() + 1)
		default:
			t.Fatalf("field %s of a type the test does not change", v.Type().Field(i).Name)
		}
		if write(r) == want {
			t.Errorf("changing %s does not change the rule file", v.Type().Field(i).Name)
		}
	}
}

func TestPromDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", time.Second: "1s", 90 * time.Second: "90s", 5 * time.Minute: "5m", 2 * time.Hour: "2h", 1500 * time.Millisecond: "1500ms"} {
		if got := promDuration(d); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}
