module github.com/rlmkit/rlm/core/isolate/seccompgen

go 1.25

require github.com/seccomp/libseccomp-golang v0.11.1
