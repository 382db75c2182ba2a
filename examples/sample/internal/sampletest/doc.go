// Package sampletest holds what the sample cluster's tests share:
// waiting on a condition with a deadline (never a sleep that hopes),
// loopback listeners the test owns, a logger whose output is shown only
// when a test fails, and an in-process kv cluster that members can
// leave and rejoin from their data directories.
package sampletest
