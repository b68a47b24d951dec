"""The embedded cluster (an API-server emulator), load generators and benchmarks."""
