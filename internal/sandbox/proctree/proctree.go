// Package proctree keeps the processes rlm starts on a short leash: each runs
// in its own process group, dies with its parent, and is killed as a whole
// group, so no interpreter, plugin or grandchild outlives its command.
//
// # Notes
//
//   - A process that calls setsid leaves its group. The process that starts
//     user code therefore becomes a child subreaper (BecomeSubreaper), so such
//     escapees are re-parented to it rather than to PID 1 (which on some
//     machines never reaps), and KillOrphans finds and ends them.
//   - Full containment of hostile code needs a pid namespace or cgroup; that is
//     internal/sandbox/isolate's job. This package is the floor every level stands on.
package proctree
