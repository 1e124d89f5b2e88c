"""simdist.engine"""
