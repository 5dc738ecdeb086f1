// Package deploy holds the container build files and the Kubernetes
// manifest for `rlm serve`. They cannot be built here; this test checks
// what can be checked without a container runtime.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

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

// manifest reads a multi-document YAML file into its objects by kind.
func manifest(t *testing.T, raw []byte, where string) map[string]obj {
	t.Helper()
	kinds := map[string]obj{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		var o obj
		if err := yaml.UnmarshalStrict([]byte(doc), &o); err != nil {
			t.Fatalf("%s does not parse: %v", where, err)
		}
		if o == nil {
			continue
		}
		k, _ := o["kind"].(string)
		kinds[k] = o
	}
	return kinds
}

// TestKubernetesManifest checks kubernetes.yaml, the plain overlay
// rendered: what issue 31 found missing on a live cluster is there (drain,
// sessions across replicas, isolation in the pod), and every flag exists.
func TestKubernetesManifest(t *testing.T) {
	raw, err := os.ReadFile("kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := manifest(t, raw, "kubernetes.yaml")
	dep, svc, pdb, np := kinds["Deployment"], kinds["Service"], kinds["PodDisruptionBudget"], kinds["NetworkPolicy"]
	if dep == nil || svc == nil || pdb == nil || np == nil {
		t.Fatalf("want a Deployment, a Service, a PodDisruptionBudget and a NetworkPolicy, got %v", kinds)
	}
	podLabels := get(dep, "spec", "template", "metadata", "labels", "app.kubernetes.io/name")
	pod := get(dep, "spec", "template", "spec")
	// Least privilege that lets bubblewrap make its sandbox: a
	// user-namespaced pod, an unmasked /proc, rlm's own seccomp profile.
	if get(pod, "securityContext", "runAsNonRoot") != true || get(pod, "hostUsers") != false ||
		get(pod, "securityContext", "seccompProfile", "type") != "Localhost" ||
		get(pod, "securityContext", "seccompProfile", "localhostProfile") != "profiles/"+seccompProfile {
		t.Errorf("pod: hostUsers %v, securityContext %v", get(pod, "hostUsers"), get(pod, "securityContext"))
	}
	if get(pod, "automountServiceAccountToken") != false {
		t.Errorf("pods get a service account token: programs could read it")
	}
	containers, _ := get(pod, "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("want one container, got %d", len(containers))
	}
	c := containers[0]
	sc := get(c, "securityContext")
	if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false ||
		get(sc, "runAsNonRoot") != true || get(sc, "privileged") != false || get(sc, "procMount") != "Unmasked" {
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
	// Readiness fails when draining; liveness must not, or the kubelet
	// would kill a draining replica.
	if get(c, "readinessProbe", "httpGet", "path") != "/health" || get(c, "livenessProbe", "httpGet") != nil {
		t.Errorf("readinessProbe %v, livenessProbe %v: want readiness on /health, liveness not on it", get(c, "readinessProbe"), get(c, "livenessProbe"))
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
	durations := map[string]time.Duration{}
	for _, a := range args {
		if m, ok := strings.CutPrefix(a, "--mode="); ok {
			for _, mode := range server.ParseModes(m) {
				if _, err := os.Stat(filepath.Join("..", "plugins", mode)); err != nil {
					t.Errorf("--mode=%s names a runtime with no plugin in this repository", mode)
				}
			}
		}
		if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && (name == "grace" || name == "drain-grace") {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Errorf("%s: %v", a, err)
			}
			durations[name] = d
		}
	}
	// Stopping: preStop sleep, then --drain-grace serving on, then --grace
	// for what is in flight, all before the kubelet's SIGKILL.
	preStop, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(float64)
	if preStop <= 0 || durations["drain-grace"] <= 0 || durations["grace"] <= 0 {
		t.Errorf("want a preStop sleep, --drain-grace and --grace; got %v s, %v", preStop, durations)
	}
	total := time.Duration(preStop)*time.Second + durations["drain-grace"] + durations["grace"]
	if tg, _ := get(pod, "terminationGracePeriodSeconds").(float64); time.Duration(tg)*time.Second <= total {
		t.Errorf("terminationGracePeriodSeconds %v is not above preStop + drain-grace + grace (%v)", tg, total)
	}
	// Sessions across replicas: the replica's own address, from the
	// downward API, and a token to sign ids with.
	env := map[string]any{}
	for _, e := range get(c, "env").([]any) {
		env[get(e, "name").(string)] = e
	}
	if get(env["RLM_ADVERTISE_ADDR"], "value") != "$(POD_IP):8080" || get(env["POD_IP"], "valueFrom", "fieldRef", "fieldPath") != "status.podIP" ||
		get(env["RLM_TOKEN"], "valueFrom", "secretKeyRef") == nil {
		t.Errorf("env lacks RLM_ADVERTISE_ADDR=$(POD_IP):8080 from the downward API, or RLM_TOKEN from a Secret: %v", env)
	}
	spread, _ := get(pod, "topologySpreadConstraints").([]any)
	if len(spread) == 0 || get(spread[0], "topologyKey") != "kubernetes.io/hostname" ||
		get(spread[0], "labelSelector", "matchLabels", "app.kubernetes.io/name") != podLabels {
		t.Errorf("topologySpreadConstraints: %v", spread)
	}
	// The Service targets the container's port by name.
	ports, _ := get(svc, "spec", "ports").([]any)
	if len(ports) == 0 || get(ports[0], "targetPort") != "http" {
		t.Errorf("service ports: %v", ports)
	}
	for what, sel := range map[string]any{
		"the Service":             get(svc, "spec", "selector", "app.kubernetes.io/name"),
		"the PodDisruptionBudget": get(pdb, "spec", "selector", "matchLabels", "app.kubernetes.io/name"),
		"the NetworkPolicy":       get(np, "spec", "podSelector", "matchLabels", "app.kubernetes.io/name"),
	} {
		if sel == nil || sel != podLabels {
			t.Errorf("%s does not select the Deployment's pods (%v, pods are %v)", what, sel, podLabels)
		}
	}
	if get(pdb, "spec", "maxUnavailable") == nil && get(pdb, "spec", "minAvailable") == nil {
		t.Errorf("the PodDisruptionBudget bounds nothing")
	}
	// Egress: only to the other replicas (session forwarding).
	types, _ := get(np, "spec", "policyTypes").([]any)
	egress, _ := get(np, "spec", "egress").([]any)
	if !slices.Contains(types, any("Egress")) || len(egress) != 1 ||
		get(egress[0], "to").([]any)[0].(obj)["podSelector"].(obj)["matchLabels"].(obj)["app.kubernetes.io/name"] != podLabels {
		t.Errorf("the NetworkPolicy must deny egress but to the replicas: %v", get(np, "spec"))
	}
}

// kustomizeCmd is how the overlays are rendered: the kustomize that
// .ci/setup installs (go install, pinned there), else kubectl's own.
func kustomizeCmd(t *testing.T) []string {
	if gopath, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		k := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "kustomize")
		if _, err := os.Stat(k); err == nil {
			return []string{k, "build"}
		}
	}
	if k, err := exec.LookPath("kustomize"); err == nil {
		return []string{k, "build"}
	}
	if k, err := exec.LookPath("kubectl"); err == nil {
		return []string{k, "kustomize"}
	}
	t.Skip("neither kustomize nor kubectl is installed: .ci/setup installs kustomize (go install sigs.k8s.io/kustomize/kustomize/v5)")
	return nil
}

// TestKustomize renders every overlay with kustomize: each builds,
// kubernetes.yaml is the plain overlay's output, the agent-sandbox overlay
// names only flags rlm serve has, and the others change what their
// comment says.
func TestKustomize(t *testing.T) {
	k := kustomizeCmd(t)
	render := func(dir string) []byte {
		out, err := exec.Command(k[0], k[1], filepath.Join("kustomize", "overlays", dir)).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				err = fmt.Errorf("%v: %s", err, ee.Stderr)
			}
			t.Fatalf("%s %s overlays/%s: %v", filepath.Base(k[0]), k[1], dir, err)
		}
		return out
	}
	file, err := os.ReadFile("kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?m)\A(#.*\n)+`).ReplaceAll(file, nil)
	if plain := render("plain"); !bytes.Equal(body, plain) {
		t.Errorf("kubernetes.yaml is not the plain overlay rendered: regenerate it (its header says how)")
	}
	priv := manifest(t, render("privileged"), "overlays/privileged")
	c := get(priv["Deployment"], "spec", "template", "spec", "containers").([]any)[0]
	if get(priv["Deployment"], "spec", "template", "spec", "hostUsers") != nil || get(c, "securityContext", "privileged") != true ||
		get(c, "securityContext", "procMount") != nil {
		t.Errorf("overlays/privileged: %v", get(c, "securityContext"))
	}
	gv := manifest(t, render("gvisor"), "overlays/gvisor")
	pod := get(gv["Deployment"], "spec", "template", "spec")
	c = get(pod, "containers").([]any)[0]
	boundary := false
	for _, e := range get(c, "env").([]any) {
		boundary = boundary || (get(e, "name") == "RLM_POD_IS_BOUNDARY" && get(e, "value") == "true")
	}
	if get(pod, "runtimeClassName") != "gvisor" || !boundary {
		t.Errorf("overlays/gvisor: runtimeClassName %v, RLM_POD_IS_BOUNDARY set %v", get(pod, "runtimeClassName"), boundary)
	}
	as := manifest(t, render("agent-sandbox"), "overlays/agent-sandbox")
	tpl, pool := as["SandboxTemplate"], as["SandboxWarmPool"]
	if tpl == nil || pool == nil || get(pool, "spec", "sandboxTemplateRef", "name") != get(tpl, "metadata", "name") {
		t.Fatalf("overlays/agent-sandbox: want a SandboxTemplate and a SandboxWarmPool of it, got %v", as)
	}
	// Port 8888 is where agent-sandbox's router and SDKs go; egress is
	// denied by leaving it empty; shell serves the SDKs' command.
	c = get(tpl, "spec", "podTemplate", "spec", "containers").([]any)[0]
	var args []string
	for _, a := range get(c, "args").([]any) {
		args = append(args, a.(string))
	}
	checkFlags(t, "overlays/agent-sandbox", args)
	if !slices.Contains(args, "--addr=0.0.0.0:8888") || !slices.ContainsFunc(args, func(a string) bool {
		m, ok := strings.CutPrefix(a, "--mode=")
		return ok && slices.Contains(server.ParseModes(m), "shell")
	}) {
		t.Errorf("overlays/agent-sandbox: rlm must listen on :8888 and serve shell: %v", args)
	}
	if get(tpl, "spec", "networkPolicy", "egress") != nil || get(tpl, "spec", "networkPolicyManagement") != "Managed" {
		t.Errorf("overlays/agent-sandbox: sandboxes must get no egress: %v", get(tpl, "spec", "networkPolicy"))
	}
}

// seccompProfile is rlm's seccomp profile for its pods.
const seccompProfile = "rlm-bwrap.seccomp.json"

// TestSeccompProfile checks rlm's pod profile: an allowlist that lets
// bubblewrap build its sandbox (user namespaces, mounts, pivot_root) and
// refuses every call the sandbox itself refuses (internal/sandbox/isolate's
// blocklist) that bubblewrap does not need before it applies that list.
func TestSeccompProfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("kustomize", "base", seccompProfile))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []struct {
			Names  []string `json:"names"`
			Action string   `json:"action"`
			Args   []any    `json:"args"`
		} `json:"syscalls"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("defaultAction %s: the profile must be an allowlist", p.DefaultAction)
	}
	allowed := map[string]bool{}
	for _, s := range p.Syscalls {
		if s.Action == "SCMP_ACT_ALLOW" && len(s.Args) == 0 {
			for _, n := range s.Names {
				allowed[n] = true
			}
		}
	}
	bwrap := []string{"clone", "clone3", "unshare", "setns", "mount", "umount2", "pivot_root", "sethostname",
		"prctl", "seccomp", "capset", "execve", "wait4", "openat", "chdir", "fchdir", "setresuid", "setresgid"}
	for _, n := range bwrap {
		if !allowed[n] {
			t.Errorf("%s is not allowed: bubblewrap needs it", n)
		}
	}
	list, err := os.ReadFile(filepath.Join("..", "internal", "sandbox", "isolate", "seccomp_blocklist.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(list), "\n") {
		n := strings.TrimSpace(strings.Split(line, "#")[0])
		if n != "" && allowed[n] && !slices.Contains(bwrap, n) {
			t.Errorf("%s is allowed, though the sandbox refuses it and bubblewrap does not need it", n)
		}
	}
	if len(allowed) < 250 {
		t.Errorf("only %d calls allowed: rlm and its runtimes need the ordinary ones", len(allowed))
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
