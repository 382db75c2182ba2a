// Package ssh is the driver for members on hosts reached over SSH,
// with no agent there (the substrate ssh): one connection per host
// (golang.org/x/crypto/ssh), its key checked against a known_hosts file
// before anything is sent (an unknown or changed key stops everything,
// naming the host and both fingerprints), the user's keys from files
// named in the description (0600) or an SSH agent.
//
// Every operation is a command run through the host's sshd: ferry's
// helper (helper.sh, a fixed script sent with the command, every
// argument quoted by Quote) or the description's own command for it
// (commands: start, stop, status, version, logs; sudo only for the
// operations marked). An artifact is copied to the host once,
// resumably, and its sha256 checked there before it is used. A host
// that does not answer has its members observed as Unknown, the host
// named: the engine holds admissions until it answers again.
package ssh
