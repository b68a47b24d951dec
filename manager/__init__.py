"""The coordinator: leader election, informers and store, routing, slots, snapshots, CLI."""
