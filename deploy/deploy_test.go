// Package deploy holds the container build files and the Kubernetes
// manifest for `rlm serve`. They cannot be built here; this test checks
// what can be checked without a container runtime.
package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/cmd/rlm/cli/servecmd"
	"github.com/rlmkit/rlm/core/server"
)

func serveFlags() *pflag.FlagSet {
	f := &cmdutil.Factory{IO: &cmdutil.IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}}
	return servecmd.NewCmd(f, nil).Flags()
}

// checkFlags fails for every --flag in args that rlm serve does not have.
func checkFlags(t *testing.T, where string, args []string) int {
	fl := serveFlags()
	n := 0
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		n++
		if fl.Lookup(name) == nil {
			t.Errorf("%s: rlm serve has no flag --%s", where, name)
		}
	}
	return n
}

type obj = map[string]any

func get(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func TestKubernetesManifest(t *testing.T) {
	raw, err := os.ReadFile("kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]obj{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		var o obj
		if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
			t.Fatalf("kubernetes.yaml does not parse: %v", err)
		}
		if o == nil {
			continue
		}
		k, _ := o["kind"].(string)
		kinds[k] = o
	}
	dep, svc := kinds["Deployment"], kinds["Service"]
	if dep == nil || svc == nil {
		t.Fatalf("want a Deployment and a Service, got %v", kinds)
	}
	pod := get(dep, "spec", "template", "spec")
	if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod securityContext: %v", get(pod, "securityContext"))
	}
	containers, _ := get(pod, "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0]
	sc := get(c, "securityContext")
	if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false ||
		get(sc, "runAsNonRoot") != true || get(sc, "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("container securityContext: %v", sc)
	}
	if drop, _ := get(sc, "capabilities", "drop").([]any); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("capabilities.drop = %v, want [ALL]", drop)
	}
	for _, r := range []string{"cpu", "memory"} {
		if get(c, "resources", "limits", r) == nil || get(c, "resources", "requests", r) == nil {
			t.Errorf("resources lack a %s request or limit", r)
		}
	}
	if get(c, "readinessProbe", "httpGet", "path") != "/health" {
		t.Errorf("readinessProbe: %v", get(c, "readinessProbe"))
	}
	// A read-only root needs a writable /tmp for the programs.
	mounts, _ := get(c, "volumeMounts").([]any)
	tmp := false
	for _, m := range mounts {
		tmp = tmp || get(m, "mountPath") == "/tmp"
	}
	if !tmp {
		t.Errorf("no writable /tmp volume under a read-only root filesystem")
	}
	cmd, _ := get(c, "command").([]any)
	if len(cmd) != 2 || cmd[0] != "rlm" || cmd[1] != "serve" {
		t.Errorf("command = %v, want [rlm serve]", cmd)
	}
	var args []string
	for _, a := range get(c, "args").([]any) {
		args = append(args, a.(string))
	}
	if checkFlags(t, "kubernetes.yaml", args) < 5 {
		t.Errorf("the manifest names few flags: %v", args)
	}
	for _, a := range args {
		if m, ok := strings.CutPrefix(a, "--mode="); ok {
			for _, mode := range server.ParseModes(m) {
				if _, err := os.Stat(filepath.Join("..", "plugins", mode)); err != nil {
					t.Errorf("--mode=%s names a runtime with no plugin in this repository", mode)
				}
			}
		}
	}
	// The Service targets the container's port by name.
	ports, _ := get(svc, "spec", "ports").([]any)
	if len(ports) == 0 || get(ports[0], "targetPort") != "http" {
		t.Errorf("service ports: %v", ports)
	}
	if get(svc, "spec", "selector", "app.kubernetes.io/name") != get(dep, "spec", "template", "metadata", "labels", "app.kubernetes.io/name") {
		t.Errorf("the Service does not select the Deployment's pods")
	}
}

func TestDockerfiles(t *testing.T) {
	files, _ := filepath.Glob("Dockerfile.*")
	got := map[string]bool{}
	for _, f := range files {
		mode := strings.TrimPrefix(filepath.Base(f), "Dockerfile.")
		got[mode] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if !strings.Contains(s, "./plugins/"+mode+"/cmd/rlm-plugin-"+mode) || !strings.Contains(s, "rlm-plugin-"+mode+" /usr/local/bin/") {
			t.Errorf("%s does not build and install rlm-plugin-%s", f, mode)
		}
		if !strings.Contains(s, "RLM_MODE="+mode) {
			t.Errorf("%s does not set RLM_MODE=%s", f, mode)
		}
		if !regexp.MustCompile(`(?m)^USER [1-9]`).MatchString(s) {
			t.Errorf("%s does not run as a non-root user", f)
		}
		if !strings.Contains(s, `ENTRYPOINT ["rlm", "serve"]`) {
			t.Errorf("%s does not run rlm serve", f)
		}
		// Flags in CMD exist.
		if m := regexp.MustCompile(`(?m)^CMD \[(.*)\]`).FindStringSubmatch(s); m != nil {
			var args []string
			for _, a := range strings.Split(m[1], ",") {
				args = append(args, strings.Trim(strings.TrimSpace(a), `"`))
			}
			checkFlags(t, f, args)
		}
	}
	for _, m := range server.DetectOrder {
		if !got[m] {
			t.Errorf("no deploy/Dockerfile.%s", m)
		}
	}
}
