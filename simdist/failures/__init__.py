"""simdist.failures"""
