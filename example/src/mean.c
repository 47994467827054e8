#include "stats.h"

double mean(const double *xs, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += xs[i];
    return n ? sum / n : 0.0;
}
