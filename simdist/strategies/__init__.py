"""simdist.strategies"""
