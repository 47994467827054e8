#include <stdio.h>
#include "stats.h"

int main(void) {
    double xs[] = {3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0};
    int n = sizeof xs / sizeof xs[0];
    printf("n=%d mean=%.3f max=%.1f\n", n, mean(xs, n), maximum(xs, n));
    return 0;
}
