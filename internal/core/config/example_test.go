package config_test

import (
	"fmt"

	"github.com/ferry-upgrade/ferry/internal/core/config"
)

func ExampleParse() {
	_, err := config.Parse([]byte(`cluster: demo
hosts:
  - {name: host-1, agent: 127.0.0.1:7101}
components:
  - name: api
    strategy: {type: canary, max_batch: 0, max_unavailable: 3}
    members:
      - {name: api-1, host: host-1, address: 127.0.0.1:8201}
      - {name: api-2, host: host-2, adress: 127.0.0.1:8202}
releases:
  - version: 1.0.0
    artifacts: {"*": {path: bin/api, sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef}}
`), "cluster.yaml")
	fmt.Println(err)
	// Output:
	// cluster.yaml:6: components[0].strategy.max_unavailable: max_unavailable 3 is more than the 2 members
	// cluster.yaml:6: components[0].strategy.max_batch: 0 is written, but a batch of 0 members never moves: write 1 to 3 (max_unavailable), or leave it out for the default (max_unavailable)
	// cluster.yaml:9: components[0].members[1].adress: unknown key (did you mean address?); known keys: name, host, address, vars, domain, adopt
	// cluster.yaml:9: components[0].members[1].host: no host "host-2" in hosts (known: host-1)
}

func ExampleRender() {
	c, err := config.Load("testdata/good.yaml")
	if err != nil {
		panic(err)
	}
	kv := c.Component("kv")
	d := c.DataFor(kv, &kv.Members[0])
	peers, err := config.Render(`{{range $i, $m := .Members}}{{if $i}},{{end}}{{$m.Name}}={{$m.Vars.raft}}{{end}}`, d)
	fmt.Println(peers, err)
	// Output:
	// kv-1=127.0.0.1:9101,kv-2=127.0.0.1:9102,kv-3=127.0.0.1:9103 <nil>
}
