package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written as "30s", "1m30s" or "250ms".
type Duration time.Duration

// UnmarshalTOML accepts a Go duration string.
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a duration string such as \"30s\", got %v", v)
	}
	x, err := ParseDuration(s)
	*d = Duration(x)
	return err
}

// MarshalText writes the Go form.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// ParseDuration is time.ParseDuration that also takes a bare number of
// seconds, and refuses negative values.
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("duration %q is negative", s)
		}
		return time.Duration(n * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use forms like 30s, 1m30s, 250ms", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// Size is a byte count written as an integer or "10MB", "512KiB", "1G".
type Size int64

// UnmarshalTOML accepts an integer or a size string.
func (z *Size) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return fmt.Errorf("size %d is negative", x)
		}
		*z = Size(x)
		return nil
	case string:
		n, err := ParseSize(x)
		*z = Size(n)
		return err
	}
	return fmt.Errorf("want a size such as 1048576 or \"1MiB\", got %v", v)
}

// MarshalText writes plain bytes.
func (z Size) MarshalText() ([]byte, error) { return []byte(strconv.FormatInt(int64(z), 10)), nil }

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// ParseSize reads "1048576", "1MiB", "10MB", "512k".
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(t, u.suffix) {
			mult = u.mult
			t = strings.TrimSpace(strings.TrimSuffix(t, u.suffix))
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size: use forms like 1048576, 64KiB, 10MB, 1GiB", s)
	}
	return int64(n * float64(mult)), nil
}
