// Package quorum replicates opaque entries with etcd raft.
package quorum
