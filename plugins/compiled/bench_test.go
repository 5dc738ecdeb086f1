package compiled

import (
	"context"
	"fmt"
	"testing"

	"github.com/rlmkit/rlm/core"
	"github.com/rlmkit/rlm/core/plugin/native"
)

// hellos are a hello world per language; %d makes a cold source distinct.
var hellos = map[*Lang]string{
	C:    "#include <stdio.h>\nint main(void) { puts(\"hi\"); return 0; } // %d\n",
	CPP:  "#include <iostream>\nint main() { std::cout << \"hi\\n\"; } // %d\n",
	Java: "public class Main { public static void main(String[] a) { System.out.println(\"hi\"); } } // %d\n",
	Rust: "fn main() { println!(\"hi\"); } // %d\n",
}

// BenchmarkHello runs a hello world per language, cold (a source never
// compiled: the compiler runs) and cached (the same source again: only the
// program runs), at isolation none so the figures are the compiler's and
// the program's own. BENCHMARKS.md has the command and the figures.
func BenchmarkHello(b *testing.B) {
	b.Setenv("XDG_CACHE_HOME", b.TempDir())
	for _, l := range []*Lang{C, CPP, Java, Rust} {
		srv := native.New(l.Runtime())
		run := func(b *testing.B, code string, cached bool) {
			r, err := srv.Run(context.Background(), core.Program{Code: code, Limits: core.Limits{Isolation: "none"}})
			if err != nil {
				b.Fatal(err)
			}
			if r.Stdout != "hi\n" || r.Compile == nil || r.Compile.Cached != cached {
				b.Fatalf("%s: stdout %q stderr %q compile %+v", l.Name, r.Stdout, r.Stderr, r.Compile)
			}
		}
		b.Run(l.Name+"/cold", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				run(b, fmt.Sprintf(hellos[l], i), false)
			}
		})
		b.Run(l.Name+"/cached", func(b *testing.B) {
			code := fmt.Sprintf(hellos[l], -1)
			run(b, code, false)
			for b.Loop() {
				run(b, code, true)
			}
		})
	}
}
