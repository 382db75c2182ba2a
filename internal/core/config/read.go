package config

import (
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/trust/safefile"
)

// readFile reads a file the user names (-f, --traffic): a regular file
// of at most MaxFileSize bytes, read within safefile.DefaultTimeout.
// Anything else is refused at once, so that 'ferry validate -f FIFO'
// (or /dev/zero, or a directory) fails with a message instead of
// hanging; what names the file's role in that message.
func readFile(path, what string) ([]byte, error) {
	b, err := safefile.Read(path, MaxFileSize, safefile.DefaultTimeout)
	if err != nil {
		return nil, fmt.Errorf("config: reading the %s: %w", what, err)
	}
	return b, nil
}
