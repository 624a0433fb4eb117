"""Adam (Kingma & Ba 2015), the stochastic-gradient optimiser shared by the estimators."""

import numpy as np

__all__ = ["Adam"]


class Adam:
    """Adam ascent on a list of arrays, updated in place.

    Parameters
    ----------
    shapes : list of tuple
        Shapes of the parameter arrays.
    lr : float
        Step size.
    beta1, beta2 : float, default=0.9, 0.999
        Decay rates of the first and second moment estimates.
    eps : float, default=1e-8
        Added to the root of the second moment.

    References
    ----------
    D. P. Kingma and J. Ba, "Adam: a method for stochastic optimization", ICLR 2015.
    """

    def __init__(self, shapes, lr, beta1=0.9, beta2=0.999, eps=1e-8):
        self.m = [np.zeros(s) for s in shapes]
        self.v = [np.zeros(s) for s in shapes]
        self.lr, self.b1, self.b2, self.eps, self.t = lr, beta1, beta2, eps, 0

    def step(self, params, grads):
        """One ascent step: ``params[k] += lr * mhat / (sqrt(vhat) + eps)``, in place.

        Parameters
        ----------
        params : list of ndarray
            The parameters, modified in place.
        grads : list of ndarray
            Their gradients (of the objective to maximise).
        """
        self.t += 1
        c1 = 1.0 - self.b1**self.t
        c2 = 1.0 - self.b2**self.t
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m *= self.b1
            m += (1.0 - self.b1) * g
            v *= self.b2
            v += (1.0 - self.b2) * g * g
            p += self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)
