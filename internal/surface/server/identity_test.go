package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ferry-upgrade/ferry/internal/trust/bearer"
)

// TestOverrideByTokenName: with named tokens, an override's "by" is
// the name of the token its request carried, whatever the body's "by"
// says (a client before named tokens sends one: it is read and
// ignored, not refused); the record, the answer and the event say so.
// The data directory's token is not accepted beside named tokens, and
// neither token reaches the log.
func TestOverrideByTokenName(t *testing.T) {
	o := offlineCluster(t)
	const annTok, bobTok = "ann-token-0123456789abcdef", "bob-token-0123456789abcdef"
	var logBuf syncWriter
	s := newTestServer(t, o, func(c *Config) {
		c.Token = ""
		c.Tokens = []bearer.Named{{Name: "ann", Token: annTok}, {Name: "bob@ops", Token: bobTok}}
		c.Logger = slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	u := stuckUpgrade(t, boltOf(s), o.cfg.Digest)
	ann := serve(t, s)
	ann.token = annTok
	bob := *ann
	bob.token = bobTok

	dirTok, err := os.ReadFile(filepath.Join(o.dataDir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	ann.do("GET", "/v1/upgrade", nil, "Authorization", "Bearer "+strings.TrimSpace(string(dirTok))).
		expect(t, "the data directory's token beside named tokens", 401, CodeUnauthorized)

	var st UpgradeStatus
	ann.do("POST", "/v1/upgrade/overrides", `{"predicate": "quorum", "member": "app-1", "by": "mallory", "reason": "kv-3 is gone for good"}`).
		expect(t, "ann's override claiming to be mallory's", 201).json(t, &st)
	if n := len(st.Upgrade.Overrides); n != 1 || st.Upgrade.Overrides[0].By != "ann" {
		t.Fatalf("the override's by: %+v, want ann (the token's name), not what the body says", st.Upgrade.Overrides)
	}
	bob.do("POST", "/v1/upgrade/overrides", `{"predicate": "quorum", "member": "app-1", "revoke": true}`).
		expect(t, "bob's revoke", 201).json(t, &st)
	if n := len(st.Upgrade.Overrides); n != 2 || st.Upgrade.Overrides[1].By != "bob@ops" || !st.Upgrade.Overrides[1].Revoke {
		t.Fatalf("the revoke's by: %+v, want bob@ops", st.Upgrade.Overrides)
	}
	rec, err := boltOf(s).Get(u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Overrides) != 2 || rec.Overrides[0].By != "ann" || rec.Overrides[1].By != "bob@ops" {
		t.Fatalf("the record's overrides: %+v", rec.Overrides)
	}
	var page Events
	waitFor(t, 5*time.Second, "the overrides' events", func() bool {
		ann.do("GET", "/v1/events?upgrade="+u.ID, nil).expect(t, "events", 200).json(t, &page)
		var says []string
		for _, ev := range page.Events {
			says = append(says, ev.Message)
		}
		all := strings.Join(says, "\n")
		return strings.Contains(all, "switched off by ann: kv-3 is gone for good") && strings.Contains(all, "revoked by bob@ops") && !strings.Contains(all, "mallory")
	})
	for _, tok := range []string{annTok, bobTok} {
		if strings.Contains(logBuf.String(), tok) {
			t.Fatal("the log holds a token")
		}
	}
}
