module github.com/rlmkit/rlm/internal/isolate/seccompgen

go 1.25

require github.com/seccomp/libseccomp-golang v0.11.1
