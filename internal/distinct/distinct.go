// Package distinct keeps the first of equal strings in a list: plugin
// search paths, mode lists and sandbox mounts are all ordered lists where
// the first occurrence wins and a repeat only costs a second look.
package distinct

// Strings returns canon of each item in first-seen order, without repeats
// and without the items canon makes empty. A nil canon keeps items as they
// are.
func Strings(items []string, canon func(string) string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range items {
		if canon != nil {
			s = canon(s)
		}
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}
