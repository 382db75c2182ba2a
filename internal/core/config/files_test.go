package config

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/ferry-upgrade/ferry/internal/trust/memberfile"
)

// withFiles adds run.files to kv's run in base (lines 14 to 14+n).
func withFiles(items ...string) edit {
	return edit{"      args: [kv, \"--raft={{.Vars.raft}}\"]\n",
		"      args: [kv, \"--raft={{.Vars.raft}}\"]\n      files:\n" + "        - " + strings.Join(items, "\n        - ") + "\n"}
}

func TestRunFilesRules(t *testing.T) {
	runTable(t, []tcase{
		{"files valid", []edit{withFiles(
			`{path: conf/kv.conf, mode: "0640", content: "raft = {{.Vars.raft}}\n"}`,
			`{path: secret, content: s3cret}`,
			`{path: b.conf, mode: 0644, content: ""}`)}, nil},
		{"file path absolute", []edit{withFiles(`{path: /etc/kv.conf, content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].path: path "/etc/kv.conf" is absolute; want a path relative to the member's directory`}},
		{"file path dot-dot", []edit{withFiles(`{path: ok, content: x}`, `{path: ../kv.conf, content: x}`)},
			[]string{`t.yaml:16: components[0].run.files[1].path: path "../kv.conf" has a '..' element`}},
		{"file path not clean", []edit{withFiles(`{path: ./kv.conf, content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].path: path "./kv.conf" is not clean (want "kv.conf")`}},
		{"file path empty", []edit{withFiles(`{content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].path: path is empty`}},
		{"file path twice", []edit{withFiles(`{path: a, content: x}`, `{path: a, content: y}`)},
			[]string{`t.yaml:16: components[0].run.files[1].path: a is given twice`}},
		{"file path and directory", []edit{withFiles(`{path: conf, content: x}`, `{path: conf/kv.conf, content: y}`)},
			[]string{`t.yaml:16: components[0].run.files[1].path: conf is a file (another run.files entry), it cannot also be the directory of conf/kv.conf`}},
		{"file mode setuid", []edit{withFiles(`{path: a, mode: "4755", content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].mode: mode 4755: setuid, setgid and sticky bits are refused`}},
		{"file mode world-writable", []edit{withFiles(`{path: a, mode: "0666", content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].mode: mode 0666: world-writable files are refused`}},
		{"file mode not octal", []edit{withFiles(`{path: a, mode: rw-r--r--, content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].mode: mode "rw-r--r--": want 3 or 4 octal digits, like 0640`}},
		{"file mode decimal", []edit{withFiles(`{path: a, mode: 0689, content: x}`)},
			[]string{`t.yaml:15: components[0].run.files[0].mode: mode "0689": want octal digits, like 0640`}},
		{"file content template", []edit{withFiles(`{path: a, content: "{{.Vars.raf}}"}`)},
			[]string{`t.yaml:15: components[0].run.files[0].content: template: at <.Vars.raf>: map has no entry for key "raf"`}},
		{"file content too large", []edit{withFiles(`{path: a, content: "{{range .Members}}` + strings.Repeat("x", 400<<10) + `{{end}}"}`)},
			[]string{`t.yaml:15: components[0].run.files[0].content: template renders to more than 1048576 bytes (for member kv-1)`}},
		{"file unknown key", []edit{withFiles(`{path: a, owner: root}`)},
			[]string{`t.yaml:15: components[0].run.files[0].owner: unknown key; known keys: path, mode, content`}},
		{"files on kubernetes", []edit{{"cluster: t\n", "cluster: t\nsubstrate: kubernetes\n"}, withFiles(`{path: a, content: x}`)},
			[]string{
				`t.yaml:6: components[0].workload: must be set for the kubernetes substrate: kind (StatefulSet, DaemonSet, Deployment, NodePool) and name or selector`,
				`t.yaml:15: components[0].run.files: applies to the process substrate (a pod's files come from its image and volumes)`,
				`t.yaml:22: components[1].workload: must be set for the kubernetes substrate: kind (StatefulSet, DaemonSet, Deployment, NodePool) and name or selector`,
				`t.yaml:30: releases[0].artifacts["*"].image: must be set: the kubernetes substrate runs images`,
				`t.yaml:34: releases[1].artifacts["*"].image: must be set: the kubernetes substrate runs images`,
			}},
	})
}

func TestMemberFiles(t *testing.T) {
	src := edited(t, withFiles(
		`{path: conf/kv.conf, mode: "0640", content: "name = {{.Name}}\nraft = {{.Vars.raft}}\npeers = {{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Vars.raft}}{{end}}\n"}`,
		`{path: secret, content: s3cret}`))
	c, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kv := c.Component("kv")
	if kv.Run.Files[1].Mode != DefaultFileMode {
		t.Errorf("default mode %o", kv.Run.Files[1].Mode)
	}
	all := c.MembersData(kv)
	files, err := c.MemberFiles(kv, all[1])
	if err != nil {
		t.Fatal(err)
	}
	want := []memberfile.File{
		{Path: "conf/kv.conf", Mode: 0o640, Content: "name = kv-2\nraft = 127.0.0.1:9102\npeers = 127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103\n"},
		{Path: "secret", Mode: 0o600, Content: "s3cret"},
	}
	if len(files) != len(want) {
		t.Fatalf("files %+v", files)
	}
	for i := range want {
		if files[i] != want[i] {
			t.Errorf("file %d: %+v, want %+v", i, files[i], want[i])
		}
	}
	if api := c.Component("api"); api != nil {
		if fs, err := c.MemberFiles(api, c.MembersData(api)[0]); err != nil || fs != nil {
			t.Errorf("a component without files: %v, %v", fs, err)
		}
	}
	// A member whose data lacks a var the content uses.
	d := all[0]
	d.Vars = map[string]string{}
	if _, err := c.MemberFiles(kv, d); err == nil || !strings.Contains(err.Error(), "member kv-1: kv.run.files[0] (conf/kv.conf)") {
		t.Errorf("render error: %v", err)
	}
	var m FileMode
	if err := m.UnmarshalText([]byte("0750")); err != nil || fs.FileMode(m) != 0o750 {
		t.Errorf("UnmarshalText(0750) = %o, %v", m, err)
	}
	if b, _ := FileMode(0o640).MarshalText(); string(b) != "0640" {
		t.Errorf("MarshalText = %s", b)
	}
}
