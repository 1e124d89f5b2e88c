"""Training strategies: data-parallel iterations with gradient buckets, overlap and PS or allreduce."""
