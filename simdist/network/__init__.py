"""Network models behind one interface: analytical (alpha-beta) and flows (max-min on simpy)."""
