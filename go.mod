module github.com/rlmkit/rlm

go 1.25
