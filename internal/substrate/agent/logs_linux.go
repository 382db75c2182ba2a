package agent

import (
	"os"
	"syscall"
)

// falloc_fl_collapse_range is FALLOC_FL_COLLAPSE_RANGE from
// linux/falloc.h (the syscall package does not name it).
const fallocFlCollapseRange = 0x08

// collapseHead removes the first n bytes of f, shifting the rest down,
// in one step that the member's O_APPEND writes cannot interleave with
// (the kernel holds the inode's lock): nothing written is lost. n must
// be a multiple of the file system's block size and end before the
// end of the file; ext4 and XFS support it, others answer EOPNOTSUPP.
func collapseHead(f *os.File, n int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), fallocFlCollapseRange, 0, n)
		if err != syscall.EINTR {
			return err
		}
	}
}

// blockSize is the unit collapseHead removes in.
func blockSize(f *os.File) int64 {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(int(f.Fd()), &st); err != nil || st.Bsize <= 0 {
		return 0
	}
	return int64(st.Bsize)
}
