"""Lower bounds on AllReduce time: closed forms (sympy) and LP with cut generation."""
