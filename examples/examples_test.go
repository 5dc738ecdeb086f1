package examples_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/rlmkit/rlm/cmd/rlm/cli/clitest"
	"github.com/rlmkit/rlm/core/llm/llmtest"
	"github.com/rlmkit/rlm/examples/gen"
	"github.com/rlmkit/rlm/internal/testutil"
)

// The examples' transcripts were recorded with
//
//	go test ./examples -run TestRecord -record
//
// which runs each task through the real CLI and Python REPL against a
// fake Anthropic server answering from the scripted model below (no real
// model is reachable where rlm is built). Any trace written by
// `rlm run --trace` with a real model can replace them.
var record = flag.Bool("record", false, "re-record examples/*/transcript.jsonl from the scripted model")

var pluginDir string

func TestMain(m *testing.M) {
	testutil.BuildMain(m, &pluginDir, "../plugins/python/cmd/rlm-plugin-python")
}

// cli runs rlm with args in a clean environment.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return clitest.Run(t, pluginDir, "", args...)
}

// setup copies an example's task file and transcript into a temporary
// directory and generates its input there.
func setup(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"task.toml", "transcript.jsonl"} {
		b, err := os.ReadFile(filepath.Join(name, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	writeInput(t, name, dir)
	return dir
}

func writeInput(t *testing.T, name, dir string) {
	t.Helper()
	var buf bytes.Buffer
	var file string
	switch name {
	case "needle":
		file = "haystack.txt"
		gen.WriteHaystack(&buf, gen.HaystackBytes)
	case "aggregate":
		file = "items.txt"
		gen.WriteItems(&buf, gen.ItemCount)
	}
	if err := os.WriteFile(filepath.Join(dir, file), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// expected computes each example's right answer from its generated input.
func expected(t *testing.T, name string) string {
	var buf bytes.Buffer
	switch name {
	case "needle":
		gen.WriteHaystack(&buf, gen.HaystackBytes)
		m := regexp.MustCompile(`east vault is ([A-Z0-9-]+)`).FindSubmatch(buf.Bytes())
		return string(m[1])
	default:
		gen.WriteItems(&buf, gen.ItemCount)
		counts := map[string]int{}
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			label := strings.TrimSpace(strings.SplitN(strings.Split(l, "|")[1], ":", 2)[1])
			counts[label]++
		}
		var parts []string
		for k, v := range counts {
			parts = append(parts, fmt.Sprintf("%s: %d", k, v))
		}
		sort.Strings(parts)
		return strings.Join(parts, ", ")
	}
}

func TestExamplesReplayOffline(t *testing.T) {
	if *record {
		t.Skip("recording")
	}
	for _, name := range []string{"needle", "aggregate"} {
		t.Run(name, func(t *testing.T) {
			dir := setup(t, name)
			trace := filepath.Join(dir, "replayed.jsonl")
			stdout, stderr, code := cli(t, "run", filepath.Join(dir, "task.toml"), "--provider", "replay", "--trace", trace)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if want := expected(t, name); stdout != want+"\n" {
				t.Fatalf("answer %q, want %q", stdout, want)
			}
			out, stderr, code := cli(t, "trace", "show", trace)
			if code != 0 || !strings.Contains(out, "loop 0 (depth 0)") || !strings.Contains(out, "answer (final_var)") {
				t.Fatalf("trace show: exit %d %s\n%s", code, stderr, out)
			}
			if name == "aggregate" && !strings.Contains(out, "loop 4 (depth 1), started by loop 0") {
				t.Fatalf("trace show lacks the children:\n%s", out)
			}
		})
	}
}

// scripted is the model the transcripts were recorded from. It reads what
// a model would read (its messages) and writes the code a careful model
// would write; the answers come out of running that code on the input.
type scripted struct {
	mu      sync.Mutex
	failure string
}

func (s *scripted) fail(format string, args ...any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == "" {
		s.failure = fmt.Sprintf(format, args...)
	}
	return "FINAL(script failure)"
}

var codeRe = regexp.MustCompile(`access code for the east vault is ([A-Z0-9-]+)`)

func (s *scripted) needle(req llmtest.ChatRequest) string {
	if req.System == "" { // llm_query: read the excerpt
		m := codeRe.FindStringSubmatch(req.LastUser())
		if m == nil {
			return "The excerpt does not give the code."
		}
		return m[1]
	}
	last := req.LastUser()
	switch req.Turn() {
	case 0:
		return "The context is large; let me look at its shape first.\n\n```repl\nprint(type(context).__name__, len(context))\nprint(context[:300])\n```"
	case 1:
		return "It is a log, one entry per line. I will search for the fact instead of reading it.\n\n```repl\nhits = search_context(r\"access code\", window=120)\nprint(len(hits))\nfor h in hits[:3]:\n    print(h[\"start\"], repr(h[\"snippet\"]))\n```"
	case 2:
		if !strings.Contains(last, "Output:\n1\n") {
			return s.fail("expected one hit: %q", last)
		}
		return "One hit. I will extract the code with a regular expression and have a sub-model read the excerpt to confirm.\n\n```repl\nimport re\nm = re.search(r\"access code for the east vault is ([A-Z0-9-]+)\", hits[0][\"snippet\"])\ncode = m.group(1) if m else None\ncheck = llm_query(\"Here is a log excerpt:\\n\\n\" + hits[0][\"snippet\"] + \"\\n\\nAccording to it, what is the access code for the east vault? Reply with the code only.\").strip()\nprint(code, \"|\", check, \"|\", code == check)\n```"
	default:
		if !strings.Contains(last, "| True") {
			return s.fail("regex and sub-model disagree: %q", last)
		}
		return "The regular expression and the sub-model agree.\n\nFINAL_VAR(code)"
	}
}

func (s *scripted) aggregate(req llmtest.ChatRequest) string {
	first, last := req.Messages[0].Content, req.LastUser()
	if strings.Contains(first, "sub-task at recursion depth 1") {
		if req.Turn() == 0 {
			return "```repl\nfrom collections import Counter\nimport json\ncounts = Counter(l.split(\"|\")[1].split(\":\", 1)[1].strip() for l in context.splitlines() if \"|\" in l)\nresult = json.dumps(dict(sorted(counts.items())))\nprint(result)\n```"
		}
		return "FINAL_VAR(result)"
	}
	switch req.Turn() {
	case 0:
		return "```repl\nlines = context.splitlines()\nprint(len(lines))\nprint(\"\\n\".join(lines[:3]))\n```"
	case 1:
		return "Each line carries its label. I will split the list into chunks and let sub-calls count each chunk.\n\n```repl\nimport json\nchunks = [\"\\n\".join(lines[i:i+500]) for i in range(0, len(lines), 500)]\npartials = rlm_query_batched([\"Count the lines of this issue list by label (the text after 'label:'). Answer with a JSON object {label: count}.\"] * len(chunks), chunks)\nprint(len(chunks), partials)\n```"
	case 2:
		return "```repl\nfrom collections import Counter\ntotal = Counter()\nfor p in partials:\n    total.update(json.loads(p))\nanswer = \", \".join(f\"{k}: {v}\" for k, v in sorted(total.items()))\nprint(answer)\nprint(sum(total.values()), \"of\", len(lines))\n```"
	default:
		if !strings.Contains(last, fmt.Sprintf("%d of %d", gen.ItemCount, gen.ItemCount)) {
			return s.fail("totals do not add up: %q", last)
		}
		return "Every line is counted.\n\nFINAL_VAR(answer)"
	}
}

func TestRecordTranscripts(t *testing.T) {
	if !*record {
		t.Skip("run with -record to re-record the examples' transcripts")
	}
	for _, name := range []string{"needle", "aggregate"} {
		t.Run(name, func(t *testing.T) {
			s := &scripted{}
			answer := s.needle
			if name == "aggregate" {
				answer = s.aggregate
			}
			srv := llmtest.NewAnthropicServer(t, answer)
			t.Setenv("ANTHROPIC_API_KEY", "sk-ant-recording")
			writeInput(t, name, name)
			stdout, stderr, code := cli(t, "run", filepath.Join(name, "task.toml"), "--provider", "anthropic",
				"--base-url", srv.URL, "--trace", filepath.Join(name, "transcript.jsonl"))
			if s.failure != "" {
				t.Fatal(s.failure)
			}
			if code != 0 || stdout != expected(t, name)+"\n" {
				t.Fatalf("exit %d, answer %q: %s", code, stdout, stderr)
			}
		})
	}
}
