#ifndef STATS_H
#define STATS_H
double mean(const double *xs, int n);
double maximum(const double *xs, int n);
#endif
