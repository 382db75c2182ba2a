package store

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/ferry-upgrade/ferry/internal/core/upgrade"
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
		u, ok, err = latest(tx, func(c upgrade.Upgrade) time.Time { return c.Created })
		return err
	})
	return u, ok, err
}

// LastFinalized returns the upgrade whose finalize was attempted last:
// its pin (To) is the format the cluster's data may be in, which only
// the releases the catalog allows from it can read; cluster up refuses
// the others. ok is false when no upgrade here was ever finalized.
func (s *Store) LastFinalized() (u upgrade.Upgrade, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		u, ok, err = latest(tx, func(c upgrade.Upgrade) time.Time { return c.Finalized })
		return err
	})
	return u, ok, err
}

// LastCompleted returns the upgrade that completed last: its members'
// moves are what the next plan's estimate takes each step to need. ok
// is false when no upgrade here ever completed.
func (s *Store) LastCompleted() (u upgrade.Upgrade, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		u, ok, err = latest(tx, func(c upgrade.Upgrade) time.Time {
			if c.State != upgrade.StateCompleted {
				return time.Time{}
			}
			return c.Ended
		})
		return err
	})
	return u, ok, err
}

// latest is the stored upgrade whose time at (Created, Finalized) is
// the latest; upgrades where it is zero do not count. It compares the
// records' heads (at reads no member), and reads the latest whole.
func latest(tx *bolt.Tx, at func(upgrade.Upgrade) time.Time) (u upgrade.Upgrade, ok bool, err error) {
	ub, rb := bucket(tx, bucketUpgrades), bucket(tx, bucketRecords)
	if ub == nil {
		return u, false, nil
	}
	var id string
	var when time.Time
	err = ub.ForEach(func(k, v []byte) error {
		if rb != nil {
			if head := rb.Get(k); head != nil {
				v = head // the record's head; v is its stub
			}
		}
		c, err := upgrade.Decode(v)
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		if t := at(c); !t.IsZero() && (!ok || t.After(when)) {
			id, when, ok = string(k), t, true
		}
		return nil
	})
	if err != nil || !ok {
		return u, false, err
	}
	u, err = get(tx, id)
	return u, err == nil, err
}
