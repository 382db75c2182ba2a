package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/upgrade"
)

// LastFinalized returns the upgrade whose finalize was attempted last:
// its pin (To) is the format the cluster's data may be in, which only
// the releases the catalog allows from it can read; cluster up refuses
// the others. ok is false when no upgrade here was ever finalized.
func (s *Store) LastFinalized() (u upgrade.Upgrade, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		ub := bucket(tx, bucketUpgrades)
		if ub == nil {
			return nil
		}
		return ub.ForEach(func(k, v []byte) error {
			var c upgrade.Upgrade
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("store: upgrade %s: %w", k, err)
			}
			if !c.Finalized.IsZero() && (!ok || c.Finalized.After(u.Finalized)) {
				u, ok = c, true
			}
			return nil
		})
	})
	return u, ok, err
}
