package isolate

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// detachMounts makes this process's mount namespace a slave of its
// parent's, once, before the first mount a run makes outside its sandbox,
// when this process runs in a mount namespace of its own (internal/host/launch
// starts plugins so): the namespace was copied with the host's shared
// propagation, and without this a stage or a tmpfs mounted here would
// appear on the host again, to be left there when the plugin is killed. A
// slave still sees mounts the host makes later. In the parent's namespace
// (a plugin started by hand, tests) nothing changes: making that one a
// slave would change the host's.
var detachMounts = sync.OnceFunc(func() {
	self, err1 := os.Readlink("/proc/self/ns/mnt")
	parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", os.Getppid()))
	if err1 != nil || err2 != nil || self == parent {
		return
	}
	_ = syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_SLAVE, "")
})
