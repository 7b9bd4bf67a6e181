package gateway

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// statKey identifies one version of the file at path for the sum cache:
// its device, inode, size, and modification and change times; changed is
// the change time.
func statKey(path string, fi os.FileInfo) (key string, changed time.Time, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() {
		return "", time.Time{}, false
	}
	return fmt.Sprintf("%s dev=%d ino=%d size=%d mtime=%d.%09d ctime=%d.%09d", path, st.Dev, st.Ino, st.Size,
		st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec), time.Unix(st.Ctim.Sec, st.Ctim.Nsec), true
}
