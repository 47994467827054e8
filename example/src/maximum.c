#include "stats.h"

double maximum(const double *xs, int n) {
    double best = xs[0];
    for (int i = 1; i < n; i++) if (xs[i] > best) best = xs[i];
    return best;
}
