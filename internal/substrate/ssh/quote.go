package ssh

import (
	"errors"
	"fmt"
	"strings"
)

// Quote returns s as one word of a POSIX shell's command line, taken
// literally: sshd hands the command line of a session to the user's
// login shell, so every argument ferry sends is quoted here, and no
// string of the description is ever pasted into a line unquoted. A
// word made only of characters no shell gives a meaning to is left as
// it is; any other is wrapped in single quotes, each single quote in it
// written as '\” (close, an escaped quote, open again).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if plain(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// plain reports whether s needs no quoting: letters, digits and
// _ . / , : @ % + - only (no =, which would make a first word an
// assignment, no ~, no glob, no space).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("_./,:@%+-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// errNUL: an argument cannot hold a NUL byte (a C string ends there).
var errNUL = errors.New("an argument holds a NUL byte")

// Line is the command line that runs argv on the host: each element
// quoted. An element with a NUL byte is refused, naming it.
func Line(argv []string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("ssh: an empty command")
	}
	var b strings.Builder
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("ssh: argument %d (%.40q): %w", i, a, errNUL)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Quote(a))
	}
	return b.String(), nil
}
