#include "harness.h"

int main(int argc, char **argv)
{
    return harness_main(argc, argv);
}
