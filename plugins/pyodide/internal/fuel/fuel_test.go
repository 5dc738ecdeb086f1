package fuel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// countModule is a hand-assembled module exporting
//
//	(func (export "count") (param i32) block loop ... br_if 1 ... br 0 end end)
//	(func (export "spin") loop br 0 end)
//	(func (export "rec") call $rec)
//
// and one pre-existing global, so the fuel global gets index 1.
func countModule() []byte {
	var m []byte
	m = append(m, 0, 'a', 's', 'm', 1, 0, 0, 0)
	// type section: (i32)->() and ()->()
	m = append(m, section(1, []byte{2, 0x60, 1, 0x7f, 0, 0x60, 0, 0})...)
	// function section: f0 type0, f1 type1, f2 type1
	m = append(m, section(3, []byte{3, 0, 1, 1})...)
	// global section: one immutable i32 = 7
	m = append(m, section(6, []byte{1, 0x7f, 0x00, 0x41, 0x07, 0x0b})...)
	// export section
	exp := []byte{3}
	exp = append(exp, 5, 'c', 'o', 'u', 'n', 't', 0, 0)
	exp = append(exp, 4, 's', 'p', 'i', 'n', 0, 1)
	exp = append(exp, 3, 'r', 'e', 'c', 0, 2)
	m = append(m, section(7, exp)...)
	count := []byte{0, // no locals
		0x02, 0x40, 0x03, 0x40,
		0x20, 0x00, 0x45, 0x0d, 0x01,
		0x20, 0x00, 0x41, 0x01, 0x6b, 0x21, 0x00,
		0x0c, 0x00, 0x0b, 0x0b, 0x0b}
	spin := []byte{0, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}
	rec := []byte{0, 0x10, 0x02, 0x0b}
	code := []byte{3, byte(len(count))}
	code = append(code, count...)
	code = append(code, byte(len(spin)))
	code = append(code, spin...)
	code = append(code, byte(len(rec)))
	code = append(code, rec...)
	m = append(m, section(10, code)...)
	return m
}

func instantiate(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	mod, err := rt.Instantiate(ctx, wasm)
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return mod
}

func TestInstrumentCountsLoopIterations(t *testing.T) {
	orig := countModule()
	if IsInstrumented(orig) {
		t.Fatal("plain module reported as instrumented")
	}
	out, st, err := Instrument(orig)
	if err != nil {
		t.Fatal(err)
	}
	if st.Functions != 3 || st.Loops != 2 || st.Entries != 1 {
		t.Fatalf("stats = %+v, want 3 functions, 2 loops, 1 metered entry (rec calls)", st)
	}
	if !IsInstrumented(out) {
		t.Fatal("instrumented module not recognised")
	}
	if _, _, err := Instrument(out); err == nil {
		t.Fatal("instrumenting twice succeeded")
	}
	mod := instantiate(t, out)
	g := mod.ExportedGlobal(GlobalName).(api.MutableGlobal)
	ctx := context.Background()
	for _, n := range []uint64{0, 1, 10, 1000} {
		g.Set(1 << 40)
		if _, err := mod.ExportedFunction("count").Call(ctx, n); err != nil {
			t.Fatalf("count(%d): %v", n, err)
		}
		used := (1 << 40) - g.Get()
		// one unit per loop header execution (n+1); the entry of a
		// function without calls is not metered.
		if used != n+1 {
			t.Errorf("count(%d) used %d units, want %d", n, used, n+1)
		}
	}
}

func TestInstrumentStopsInfiniteLoop(t *testing.T) {
	out, _, err := Instrument(countModule())
	if err != nil {
		t.Fatal(err)
	}
	mod := instantiate(t, out)
	g := mod.ExportedGlobal(GlobalName).(api.MutableGlobal)
	g.Set(100_000)
	_, err = mod.ExportedFunction("spin").Call(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("spin: err = %v, want an unreachable trap", err)
	}
	if v := int64(g.Get()); v >= 0 {
		t.Fatalf("fuel after trap = %d, want negative", v)
	}
}

func TestInstrumentStopsRecursion(t *testing.T) {
	out, _, err := Instrument(countModule())
	if err != nil {
		t.Fatal(err)
	}
	mod := instantiate(t, out)
	g := mod.ExportedGlobal(GlobalName).(api.MutableGlobal)
	g.Set(1000)
	_, err = mod.ExportedFunction("rec").Call(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unreachable") || int64(g.Get()) != -1 {
		t.Fatalf("rec: err = %v, fuel = %d; want an unreachable trap at -1", err, int64(g.Get()))
	}
}

func TestInstrumentRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("hello world"), {0, 'a', 's', 'm', 2, 0, 0, 0}} {
		if _, _, err := Instrument(b); err == nil {
			t.Errorf("Instrument(%q) succeeded", b)
		}
	}
	// A truncated section must be reported, not read past.
	m := countModule()
	if _, _, err := Instrument(m[:len(m)-3]); err == nil {
		t.Error("truncated module accepted")
	}
}

// TestInstrumentPython instruments the real python.wasm when it was built.
func TestInstrumentPython(t *testing.T) {
	p := filepath.Join("..", "..", "wasm", "assets", "python.wasm")
	b, err := os.ReadFile(p)
	if err != nil {
		if os.Getenv("RLM_REQUIRE_WASM") != "" {
			t.Fatalf("RLM_REQUIRE_WASM is set but %s is missing: run make wasm", p)
		}
		t.Skipf("%s not built (run make wasm); skipping", p)
	}
	out, st, err := Instrument(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d functions (%d entries metered), %d loops, %d -> %d bytes", st.Functions, st.Entries, st.Loops, len(b), len(out))
	if st.Functions < 1000 || st.Loops < 1000 {
		t.Fatalf("implausible stats %+v", st)
	}
	// Share the runner's compilation cache: the instrumented bytes are the
	// same, so this is a cache hit after the first run (and under -race).
	cfg := wazero.NewRuntimeConfigCompiler()
	if dir, err := os.UserCacheDir(); err == nil {
		if cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(dir, "rlm", "wasm-runtime", "compiled")); err == nil {
			cfg = cfg.WithCompilationCache(cache)
		}
	}
	if _, err := wazero.NewRuntimeWithConfig(context.Background(), cfg).CompileModule(context.Background(), out); err != nil {
		t.Fatalf("instrumented python.wasm does not compile: %v", err)
	}
}
