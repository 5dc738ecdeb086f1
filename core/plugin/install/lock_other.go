//go:build !unix

package install

import (
	"context"
	"sync"
)

var mu sync.Mutex

// lock serialises installs within this process only.
func lock(ctx context.Context, _ string) (func(), error) {
	mu.Lock()
	return mu.Unlock, nil
}
