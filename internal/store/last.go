package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// Last returns the current upgrade or, when none is current (the last
// one ended and was cleared), the one created last: what a
// troubleshooting bundle is about when the operator names none. ok is
// false when there has never been an upgrade.
func (s *Store) Last() (u upgrade.Upgrade, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if u, ok, err = current(tx); err != nil || ok {
			return err
		}
		ub := bucket(tx, bucketUpgrades)
		if ub == nil {
			return nil
		}
		return ub.ForEach(func(k, v []byte) error {
			var c upgrade.Upgrade
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("store: upgrade %s: %w", k, err)
			}
			if !ok || c.Created.After(u.Created) {
				u, ok = c, true
			}
			return nil
		})
	})
	return u, ok, err
}
