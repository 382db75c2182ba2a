package cli

import (
	"strconv"
	"strings"
)

// termText returns s with each control character (C0 but tab, DEL,
// C1) written as its Go escape (\x1b, \u009b), for text that comes from
// the description or from a service and is printed on a terminal: a
// request's name or path there could otherwise clear the screen or set
// the window's title.
func termText(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0)
}
