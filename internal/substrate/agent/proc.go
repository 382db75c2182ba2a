package agent

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// parseStat parses the contents of /proc/<pid>/stat. The command name
// (field 2) is in parentheses and may itself hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStat(b []byte) (state byte, start uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat: no ')'")
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state), so field 22 is fields[19].
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("malformed /proc stat: %d fields after the command", len(fields))
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed /proc stat start time: %v", err)
	}
	return fields[0][0], start, nil
}

// sessionOf returns the session id (field 6) of /proc/<pid>/stat
// contents, or -1.
func sessionOf(b []byte) int {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return -1
	}
	sid, err := strconv.Atoi(string(f[3]))
	if err != nil {
		return -1
	}
	return sid
}
