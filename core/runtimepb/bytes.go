package runtimepb

// Code, arguments and environment values travel as bytes (see RunRequest):
// Go strings hold any bytes, so the host and plugins keep using strings and
// convert at the wire with these helpers. Nothing is decoded or replaced.

// Bytes converts strings to the wire's repeated bytes.
func Bytes(ss []string) [][]byte {
	if ss == nil {
		return nil
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// Strings converts the wire's repeated bytes back to strings, byte for byte.
func Strings(bs [][]byte) []string {
	if bs == nil {
		return nil
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// EnvBytes converts an environment (name → value) to the wire's form.
func EnvBytes(env map[string]string) map[string][]byte {
	if env == nil {
		return nil
	}
	out := make(map[string][]byte, len(env))
	for k, v := range env {
		out[k] = []byte(v)
	}
	return out
}

// EnvStrings converts the wire's environment back, byte for byte.
func EnvStrings(env map[string][]byte) map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = string(v)
	}
	return out
}
