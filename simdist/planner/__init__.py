"""simdist.planner"""
