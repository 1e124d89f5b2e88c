"""Failures, stragglers and goodput (layer 4): component failure models, scheduled events, recovery
policies and the job-level goodput timeline. The engine supplies the iteration time of each cluster
state (engine/composite.py); nothing here runs the network itself."""
