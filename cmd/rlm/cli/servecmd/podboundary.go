package servecmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rlmkit/rlm/cmd/rlm/cli/cmdutil"
	"github.com/rlmkit/rlm/core/client"
	"github.com/rlmkit/rlm/internal/sandbox/isolate"
)

// Inside a Kubernetes pod the usual hardened securityContext
// (seccompProfile RuntimeDefault, every capability dropped) keeps
// bubblewrap from creating a user namespace, so isolation auto quietly
// fell to process (issue 31): programs then share the pod's files,
// network and mounted credentials with rlm itself, and nothing said so.
// In a pod, rlm serve therefore refuses to run a mode's programs below
// namespace isolation unless the operator says, in the manifest, that the
// pod itself is the boundary (a gVisor or Kata RuntimeClass, one pod per
// tenant as agent-sandbox hands out).

// registerPodBoundaryFlag adds --pod-is-boundary (see checkPodBoundary).
func (o *Options) registerPodBoundaryFlag(fl *pflag.FlagSet) {
	fl.BoolVar(&o.PodIsBoundary, "pod-is-boundary", false, "in a Kubernetes pod, serve although programs cannot get namespace isolation there, accepting the pod (its RuntimeClass, such as gVisor) as the sandbox boundary (env RLM_POD_IS_BOUNDARY)")
}

// inKubernetes says whether this process runs in a Kubernetes pod: the
// kubelet sets KUBERNETES_SERVICE_HOST in every container.
func inKubernetes() bool { return os.Getenv("KUBERNETES_SERVICE_HOST") != "" }

// podIsBoundary is --pod-is-boundary, else RLM_POD_IS_BOUNDARY.
func (o *Options) podIsBoundary() (bool, error) {
	if o.Changed != nil && o.Changed("pod-is-boundary") {
		return o.PodIsBoundary, nil
	}
	v := os.Getenv("RLM_POD_IS_BOUNDARY")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("RLM_POD_IS_BOUNDARY=%q: use true or false", v)
	}
	return b, nil
}

// checkPodBoundary refuses, inside a pod, modes whose programs would run
// at isolation none or process, unless the pod is accepted as the
// boundary; see the note above. Levels of a plugin's own (wasm) are a
// boundary of their own and pass.
func (o *Options) checkPodBoundary(ctx context.Context, rts map[string]*client.Runtime, requested string, logger *slog.Logger) error {
	if !inKubernetes() {
		return nil
	}
	accepted, err := o.podIsBoundary()
	if err != nil {
		return cmdutil.Usage(err)
	}
	var weak []string
	for m, rt := range rts {
		level, err := rt.Isolation(ctx, requested, false)
		if err != nil || (level != "none" && level != "process") {
			continue // refused elsewhere, or a real boundary
		}
		// The host's reason first (what bubblewrap said): a plugin that
		// probed the same host only says it does not declare namespace.
		why := "namespace isolation is not what was asked for (--isolation " + requested + ")"
		if err := isolate.Available(isolate.LevelNamespace); err != nil {
			why = err.Error()
		} else if _, err := rt.Isolation(ctx, "namespace", false); err != nil {
			why = err.Error()
		}
		weak = append(weak, fmt.Sprintf("mode=%s would run programs at isolation %s: %s", m, level, why))
	}
	if len(weak) == 0 {
		return nil
	}
	if accepted {
		logger.Warn("the pod is the sandbox boundary (--pod-is-boundary): programs run without namespace isolation inside it", "modes", strings.Join(weak, "; "))
		return nil
	}
	return cmdutil.Usagef("refusing to serve in this Kubernetes pod (KUBERNETES_SERVICE_HOST is set) without namespace isolation:\n  %s\n"+
		"Programs would share the pod's files, network and mounted credentials with rlm. Give the pod rlm's seccomp profile "+
		"(deploy/kustomize/base, docs/kubernetes.md) so bubblewrap can create its namespaces, or, when the pod itself is the sandbox "+
		"(a gVisor or Kata RuntimeClass, one pod per tenant), say so in the manifest: --pod-is-boundary (RLM_POD_IS_BOUNDARY=true)",
		strings.Join(weak, "\n  "))
}
