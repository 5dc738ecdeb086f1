package runtimepb

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/ending"
)

// fill sets every field of v (a pointer to a struct) to a value that is not
// the zero one, recursing into structs, pointers, slices and maps, so that
// a field a translation forgets shows up as a difference.
func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), n)
			}
		}
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(int64(*n) * int64(time.Millisecond))
			return
		}
		v.SetInt(int64(*n))
	case reflect.Uint8:
		v.SetUint(uint64(0x80 + *n%64)) // bytes that are not UTF-8 on their own
	case reflect.Func:
		// callbacks (Bridges) are the host's and never translated
	case reflect.Uint32:
		if v.Type() == reflect.TypeFor[fs.FileMode]() {
			v.SetUint(0o600)
			return
		}
		v.SetUint(uint64(*n))
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(t, s.Index(i), n)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, n)
		fill(t, e, n)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("fill: no rule for %s", v.Type())
	}
}

func filled[T any](t *testing.T) T {
	var x T
	n := 0
	fill(t, reflect.ValueOf(&x).Elem(), &n)
	return x
}

// Every field of a result survives the wire both ways; the fields
// ResultFromProto derives are derived.
func TestResultRoundTrip(t *testing.T) {
	r := filled[core.Result](t)
	r.EndedBy = ending.Timeout
	r.Stdout = "ok \xff" // not UTF-8: its base64 form is derived
	r.Duration = 1500 * time.Microsecond
	r.StdoutBase64, r.StderrBase64, r.TimedOut, r.Truncated = "", "", false, false
	for i := range r.Files {
		r.Files[i].Mode = 0o600
	}
	r.Compile.EndedBy = ending.Exit
	got := ResultFromProto(ResultProto(&r))
	want := r
	want.StdoutBase64 = core.Base64IfBinary([]byte(r.Stdout))
	want.TimedOut, want.Truncated = true, true
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *got, want)
	}
}

// A runtime that sets only Duration still sends duration_ms.
func TestResultDurationMs(t *testing.T) {
	if got := ResultProto(&core.Result{Duration: 42 * time.Millisecond}).GetDurationMs(); got != 42 {
		t.Errorf("duration_ms = %d, want 42", got)
	}
}

func TestProgramRoundTrip(t *testing.T) {
	p := filled[core.Program](t)
	p.Limits.Strict = 0 // the host's: it does not travel
	p.Context.Kind = "json"
	if got := ProgramFromProto(ProgramProto(p)); !reflect.DeepEqual(got, p) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, p)
	}
}

func TestSessionRoundTrip(t *testing.T) {
	o := filled[core.SessionOptions](t)
	o.Limits.Strict = 0
	o.Context.Kind = "text"
	// Bridges and ReturnFiles are the host's: callbacks and file requests
	// travel per cell, not in the open message.
	o.Bridges, o.ReturnFiles = core.Bridges{}, false
	if got := SessionFromProto(SessionProto(o)); !reflect.DeepEqual(got, o) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, o)
	}
}

func TestInfoRoundTrip(t *testing.T) {
	i := filled[core.Info](t)
	if got := InfoFromProto(InfoProto(i)); !reflect.DeepEqual(*got, i) {
		t.Errorf("round trip:\n got %+v\nwant %+v", *got, i)
	}
}

func TestQueryRoundTrip(t *testing.T) {
	q := filled[core.Query](t)
	c := QueryProto(7, q)
	if c.GetCallId() != 7 {
		t.Errorf("call id = %d, want 7", c.GetCallId())
	}
	if got := QueryFromProto(c); !reflect.DeepEqual(got, q) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, q)
	}
}

// A positive duration under a millisecond must not become 0 on the wire,
// which means "the default" (30 s for the wall clock): a --timeout of 1ns
// is 1 ms, never the default.
func TestLimitsProtoSubMillisecond(t *testing.T) {
	l := LimitsProto(core.Limits{Wall: time.Nanosecond, CPU: 500 * time.Microsecond, InstallTimeout: 999 * time.Microsecond})
	if l.GetWallMs() != 1 || l.GetCpuMs() != 1 || l.GetInstallTimeoutMs() != 1 {
		t.Errorf("sub-millisecond limits on the wire: wall %d, cpu %d, install %d ms; want 1 each", l.GetWallMs(), l.GetCpuMs(), l.GetInstallTimeoutMs())
	}
	if l := LimitsProto(core.Limits{Wall: 2500 * time.Microsecond}); l.GetWallMs() != 2 {
		t.Errorf("2.5 ms is %d ms on the wire, want 2", l.GetWallMs())
	}
	if l := LimitsProto(core.Limits{}); l.GetWallMs() != 0 || l.GetCpuMs() != 0 || l.GetInstallTimeoutMs() != 0 {
		t.Errorf("zero limits must stay 0 (the defaults): %v", l)
	}
}

// Every error kind crosses the wire both ways as what it was: a refusal
// keeps its kind and text, a context's end stays one, an unsupported call
// and a lost connection are recognisable by errors.Is.
func TestErrorRoundTrip(t *testing.T) {
	for _, k := range []core.RefusalKind{core.Invalid, core.Unavailable} {
		var r *core.RefusedError
		if err := Error(Status(core.Refuse(k, errors.New("no")))); !errors.As(err, &r) || r.Kind != k || r.Msg != "no" {
			t.Errorf("refusal of kind %d came back as %#v", k, err)
		}
	}
	for _, e := range []error{context.Canceled, context.DeadlineExceeded} {
		if got := Error(Status(fmt.Errorf("wrapped: %w", e))); got != e {
			t.Errorf("%v came back as %v", e, got)
		}
	}
	if err := Error(status.Error(codes.Unimplemented, "x")); !errors.Is(err, core.ErrUnsupported) {
		t.Errorf("Unimplemented came back as %v", err)
	}
	if err := Error(status.Error(codes.Unavailable, "x")); !errors.Is(err, core.ErrRuntimeLost) {
		t.Errorf("Unavailable came back as %v", err)
	}
	if err := Error(Status(errors.New("boom"))); err == nil || err.Error() != "boom" {
		t.Errorf("an internal error came back as %v", err)
	}
	plain := errors.New("not a status")
	if Error(plain) != plain || Error(nil) != nil || Status(nil) != nil {
		t.Error("a non-status error (or nil) must pass as it is")
	}
}
